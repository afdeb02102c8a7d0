package testkit

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inflightmq/inflight/wire"
)

// The frames of a raw protocol exchange, for the tests that drive a broker
// by hand (package broker, transport/mem, server). Each decoder fails the
// test, naming the frame it got, when the frame is not of its type.

// TopicFrame returns a TOPIC frame declaring name as id.
func TopicFrame(t testing.TB, id uint32, name string) []byte {
	t.Helper()
	f, err := wire.AppendTopic(nil, wire.Topic{ID: id, Name: name})
	require.NoError(t, err)
	return f
}

// HelloOK decodes a HELLO_OK frame.
func HelloOK(t testing.TB, frame []byte) wire.HelloOK {
	t.Helper()
	h, err := wire.DecodeHelloOK(frame)
	require.NoError(t, err, "want HELLO_OK, got %s", DescribeFrame(frame))
	return h
}

// TopicOK decodes a TOPIC_OK frame.
func TopicOK(t testing.TB, frame []byte) wire.TopicOK {
	t.Helper()
	ok, err := wire.DecodeTopicOK(frame)
	require.NoError(t, err, "want TOPIC_OK, got %s", DescribeFrame(frame))
	return ok
}

// Receipts decodes a RECEIPT frame: its entries, one per topic.
func Receipts(t testing.TB, frame []byte) []wire.Receipt {
	t.Helper()
	rs, err := wire.DecodeReceipts(frame, nil)
	require.NoError(t, err, "want RECEIPT, got %s", DescribeFrame(frame))
	return rs
}

// Receipt returns the seq of a RECEIPT of one entry, for topic id 0 (the
// id the tests of a single topic declare).
func Receipt(t testing.TB, frame []byte) uint64 {
	t.Helper()
	rs := Receipts(t, frame)
	require.Len(t, rs, 1, "RECEIPT entries")
	require.Zero(t, rs[0].Topic, "RECEIPT topic id")
	return rs[0].Seq
}

// ErrorFrame decodes an ERROR frame.
func ErrorFrame(t testing.TB, frame []byte) wire.Error {
	t.Helper()
	e, err := wire.DecodeError(frame)
	require.NoError(t, err, "want ERROR, got %s", DescribeFrame(frame))
	return e
}
