package broker_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/wire"
)

func TestNew(t *testing.T) {
	store := broker.NewMemoryStore()
	tests := []struct {
		name     string
		store    broker.Store
		opts     []broker.Option
		wantErr  bool
		wantSize int
	}{
		{name: "defaults", store: store, wantSize: wire.DefaultMaxFrameSize},
		{name: "counting store", store: broker.NewCountingStore(), wantSize: wire.DefaultMaxFrameSize},
		{name: "nil store", store: nil, wantErr: true},
		{name: "nil option", store: store, opts: []broker.Option{nil}, wantErr: true},
		{name: "nil option after a valid one", store: store, opts: []broker.Option{broker.MaxFrameSize(4096), nil}, wantErr: true},
		{name: "min frame size", store: store, opts: []broker.Option{broker.MaxFrameSize(wire.MinMaxFrameSize)}, wantSize: wire.MinMaxFrameSize},
		{name: "max frame size", store: store, opts: []broker.Option{broker.MaxFrameSize(1 << 30)}, wantSize: 1 << 30},
		{name: "last option wins", store: store, opts: []broker.Option{broker.MaxFrameSize(4096), broker.MaxFrameSize(8192)}, wantSize: 8192},
		{name: "frame size below min", store: store, opts: []broker.Option{broker.MaxFrameSize(wire.MinMaxFrameSize - 1)}, wantErr: true},
		{name: "frame size zero", store: store, opts: []broker.Option{broker.MaxFrameSize(0)}, wantErr: true},
		{name: "frame size negative", store: store, opts: []broker.Option{broker.MaxFrameSize(-1)}, wantErr: true},
		{name: "frame size above max", store: store, opts: []broker.Option{broker.MaxFrameSize(1<<30 + 1)}, wantErr: true},
		{name: "buffered bytes zero", store: store, opts: []broker.Option{broker.MaxBufferedBytes(0)}, wantErr: true},
		{name: "buffered bytes below a frame", store: store, opts: []broker.Option{broker.MaxBufferedBytes(wire.DefaultMaxFrameSize)}, wantErr: true},
		{name: "buffered bytes", store: store, opts: []broker.Option{broker.MaxBufferedBytes(64 << 20)}, wantSize: wire.DefaultMaxFrameSize},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := broker.New(tt.store, tt.opts...)
			if tt.wantErr {
				require.ErrorIs(t, err, broker.ErrInvalidOption)
				assert.Nil(t, b)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantSize, b.MaxFrameSize())
			assert.Equal(t, tt.store, b.Store())
			assert.Equal(t, broker.Stats{}, b.Stats())
		})
	}
}
