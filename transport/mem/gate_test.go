package mem

import (
	"testing"
	"time"
)

func TestOpenGateDoesNotWait(t *testing.T) {
	var g Gate
	if !g.Wait(nil) {
		t.Fatal("the zero gate held a waiter")
	}
	g.Stall(true)
	g.Stall(false)
	g.Stall(false) // opening an open gate is harmless
	if !g.Wait(nil) {
		t.Fatal("a reopened gate held a waiter")
	}
}

func TestStalledGateHoldsUntilOpened(t *testing.T) {
	var g Gate
	g.Stall(true)
	g.Stall(true) // stalling twice keeps one resume channel
	passed := make(chan bool)
	go func() { passed <- g.Wait(nil) }()
	select {
	case <-passed:
		t.Fatal("a waiter passed a stalled gate")
	case <-time.After(20 * time.Millisecond):
	}
	g.Stall(false)
	select {
	case ok := <-passed:
		if !ok {
			t.Fatal("Wait reported done, but done was never closed")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not released when the gate opened")
	}
}

func TestDoneReleasesWaiter(t *testing.T) {
	var g Gate
	g.Stall(true)
	done := make(chan struct{})
	passed := make(chan bool)
	go func() { passed <- g.Wait(done) }()
	close(done)
	select {
	case ok := <-passed:
		if ok {
			t.Fatal("Wait reported the gate open while it was stalled")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("closing done did not release the waiter")
	}
}
