package broker

import (
	"testing"
)

// TestMixedTopics: a session's frames are mixed once a frame of another
// topic follows one of a first, for mixedWithin after the last such switch;
// frames of one topic, however many, are not.
func TestMixedTopics(t *testing.T) {
	b, err := New(NewMemoryStore())
	if err != nil {
		t.Fatal(err)
	}
	s := &Session{b: b}
	for range 3 {
		s.noteTopic(7)
	}
	if s.mixed() {
		t.Fatal("one topic's frames are mixed")
	}
	s.noteTopic(8)
	if !s.mixed() {
		t.Fatal("a frame of a second topic is not mixed")
	}
	s.switched.Store(b.since() - int64(2*mixedWithin)) // as if that switch were older
	s.noteTopic(8)
	if s.mixed() {
		t.Fatal("mixed long after the last switch")
	}
	s.noteTopic(0) // id 0 is a topic like any other
	if !s.mixed() {
		t.Fatal("a switch to topic 0 is not mixed")
	}
}
