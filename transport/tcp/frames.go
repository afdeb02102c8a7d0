package tcp

import (
	"github.com/panjf2000/gnet/v2"

	"github.com/inflightmq/inflight/wire"
)

// readFrames hands every complete frame buffered on c to handle, in order,
// and consumes it. It must run inside OnTraffic. It looks at the length
// prefix before anything else: a frame whose body has not fully arrived is
// left in gnet's buffer untouched (so a large frame is copied once, not once
// per read), and a length over maxFrame is an error as soon as the prefix is
// there. It returns the bytes left buffered (an incomplete frame) and the
// first error from the prefix or from handle.
func readFrames(c gnet.Conn, maxFrame int, handle func(frame []byte) error) (int, error) {
	for {
		n := c.InboundBuffered()
		if n < 4 {
			return n, nil
		}
		prefix, err := c.Peek(4)
		if err != nil {
			return n, err
		}
		if _, _, err := wire.Split(prefix, maxFrame); err != nil {
			return n, err
		}
		size, _ := wire.FrameSize(prefix)
		if n < size {
			return n, nil
		}
		frame, err := c.Peek(size)
		if err != nil {
			return n, err
		}
		if err := handle(frame); err != nil {
			return n, err
		}
		if _, err := c.Discard(size); err != nil {
			return n, err
		}
	}
}

// quietLogger drops gnet's log lines; errors that matter reach the caller
// through return values and close reasons.
type quietLogger struct{}

func (quietLogger) Debugf(string, ...any) {}
func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Warnf(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(string, ...any) {}
