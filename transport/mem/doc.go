// Package mem is an in-process transport: a Dialer whose connections lead
// straight to a broker.Broker in the same process, with fault injection.
//
// It speaks the same frames as the TCP transport, so a producer behaves the
// same over both; use it in your own tests to exercise the producer against
// a broker without sockets, and to break the connection on purpose:
//
//	b, _ := broker.New(broker.NewMemoryStore())
//	d := mem.NewDialer(b)
//	defer d.Close()
//	p, _ := core.New(d)
//	...
//	d.DropConnections()    // cut every connection now
//	d.RefuseDials(true)    // the broker is "down"
//
// Each connection runs two goroutines (the broker side reading frames, and
// the producer side delivering the broker's replies to the Handler), both
// owned by the connection and stopped by Close; Dialer.Close closes every
// connection and waits for them.
package mem
