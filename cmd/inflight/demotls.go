package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/inflightmq/inflight/broker"
	"github.com/inflightmq/inflight/core"
	"github.com/inflightmq/inflight/server"
	"github.com/inflightmq/inflight/transport/stdnet"
)

// demoSecurity is what `demo -tls` adds: a CA made for this run (in
// memory, never written anywhere), a server certificate for 127.0.0.1,
// mutual TLS, and an access list that lets the certificate demo-producer,
// and nobody else, write the demo's topic as producer demo. An intruder
// holding a certificate from the same CA tries to use the name all along.
type demoSecurity struct {
	ca  *authority
	acl *broker.ACL

	intruderRefused atomic.Uint64 // HELLOs of the intruder refused as unauthorized
	intruderAcked   atomic.Uint64 // intruder messages stored: must stay 0
}

const (
	demoCertName     = "demo-producer"
	demoIntruderName = "intruder"
)

func newDemoSecurity() (*demoSecurity, error) {
	ca, err := newAuthority("inflight demo CA", time.Now().Add(24*time.Hour))
	if err != nil {
		return nil, err
	}
	acl, err := broker.ParseACL(strings.NewReader(fmt.Sprintf("demo cert:%s %s demo\n", demoCertName, strings.Join(demoTopics[:], ","))))
	if err != nil {
		return nil, err
	}
	return &demoSecurity{ca: ca, acl: acl}, nil
}

// serverOptions returns the options of the broker and of its server.
func (s *demoSecurity) serverOptions() ([]broker.Option, []server.Option, error) {
	cert, err := s.ca.tlsCert(serverTemplate([]string{"127.0.0.1", "localhost"}))
	if err != nil {
		return nil, nil, err
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
	return []broker.Option{broker.WithACL(s.acl)},
		[]server.Option{server.TLS(cfg), server.RequireClientCert(s.ca.pool())}, nil
}

// dialer returns a TLS dialer to addr presenting a client certificate
// named cn.
func (s *demoSecurity) dialer(addr, cn string) (*stdnet.Dialer, error) {
	cert, err := s.ca.tlsCert(clientTemplate(cn))
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{RootCAs: s.ca.pool(), Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
	return stdnet.NewDialer(addr, stdnet.ClientTLS(cfg))
}

// startIntruder starts a producer with a valid certificate of another
// identity that writes the demo's topic under the demo's name: every HELLO
// must be refused. It returns a function that stops it.
func (s *demoSecurity) startIntruder(addr string, opts []core.Option) (func(), error) {
	d, err := s.dialer(addr, demoIntruderName)
	if err != nil {
		return nil, err
	}
	opts = append(opts, core.ErrorHandler(func(err error) {
		if errors.Is(err, core.ErrUnauthorized) {
			s.intruderRefused.Add(1)
		}
	}))
	p, err := core.New(d, opts...)
	if err != nil {
		d.Close()
		return nil, err
	}
	msg := &core.Message{Payload: []byte("intruder")}
	cb := func(_ core.MessageID, _ *core.Message, err error) {
		if err == nil {
			s.intruderAcked.Add(1)
		}
	}
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = p.Close(ctx) // fails the message with ErrClosed if still pending
		d.Close()
	}
	if err := p.SendAsync(context.Background(), msg, cb); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}
