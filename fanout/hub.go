// Package fanout is the in-process fan-out of stored events: the hubs that wake subscribers when
// something new is stored. What they announce is in storage already (a run's events, runtype.Event,
// are stored with a per-run seq, the source of truth of streams), so a hub never blocks its
// publisher and a subscriber that falls behind loses nothing it cannot read again.
package fanout

import "sync"

// Hub fans values out to the subscribers of a topic without ever blocking the publisher. Each
// subscriber has a buffered channel; what happens when it is full depends on the hub:
//
//   - a wake hub (NewWakeHub) drops the value: the subscriber already has a wake pending and will
//     read everything new from storage anyway;
//   - a value hub (NewHub) closes the subscriber's channel: it fell behind, and must subscribe
//     again and catch up from storage.
type Hub[T any] struct {
	mu       sync.Mutex
	subs     map[string]map[*Sub[T]]struct{}
	buffer   int
	coalesce bool
}

// Sub is one subscription. Read C (or, from SubscribeFunc, be called); call Close when done.
type Sub[T any] struct {
	C      chan T
	fn     func() // instead of C: called on each value (SubscribeFunc)
	hub    *Hub[T]
	topic  string
	closed bool
}

// NewWakeHub returns a hub whose subscribers get at most one pending wake-up each.
func NewWakeHub() *Hub[struct{}] {
	return &Hub[struct{}]{subs: map[string]map[*Sub[struct{}]]struct{}{}, buffer: 1, coalesce: true}
}

// NewHub returns a hub that delivers every value, with buffer values of slack per subscriber.
func NewHub[T any](buffer int) *Hub[T] {
	return &Hub[T]{subs: map[string]map[*Sub[T]]struct{}{}, buffer: buffer}
}

// Subscribe starts a subscription to topic.
func (h *Hub[T]) Subscribe(topic string) *Sub[T] {
	return h.add(&Sub[T]{C: make(chan T, h.buffer), hub: h, topic: topic})
}

// SubscribeFunc starts a subscription to topic that calls fn on each value published, instead
// of holding it in a channel, so that a subscriber needs no goroutine to wait for it. fn is
// called with the hub locked, by the publisher: it must return at once, and not call the hub.
func (h *Hub[T]) SubscribeFunc(topic string, fn func()) *Sub[T] {
	return h.add(&Sub[T]{fn: fn, hub: h, topic: topic})
}

func (h *Hub[T]) add(s *Sub[T]) *Sub[T] {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs[s.topic] == nil {
		h.subs[s.topic] = map[*Sub[T]]struct{}{}
	}
	h.subs[s.topic][s] = struct{}{}
	return s
}

// Publish offers v to every subscriber of topic, without blocking.
func (h *Hub[T]) Publish(topic string, v T) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[topic] {
		if s.fn != nil {
			s.fn()
			continue
		}
		select {
		case s.C <- v:
		default:
			if !h.coalesce {
				h.removeLocked(s)
			}
		}
	}
}

// Count returns the number of subscribers of topic.
func (h *Hub[T]) Count(topic string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs[topic])
}

// Close ends the subscription; it is safe to call more than once.
func (s *Sub[T]) Close() {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	s.hub.removeLocked(s)
}

func (h *Hub[T]) removeLocked(s *Sub[T]) {
	if s.closed {
		return
	}
	s.closed = true
	if s.C != nil {
		close(s.C)
	}
	delete(h.subs[s.topic], s)
	if len(h.subs[s.topic]) == 0 {
		delete(h.subs, s.topic)
	}
}

// CloseAll ends every subscription of topic.
func (h *Hub[T]) CloseAll(topic string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[topic] {
		h.removeLocked(s)
	}
}

// Topics returns the topics that have subscribers now.
func (h *Hub[T]) Topics() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.subs))
	for t := range h.subs {
		out = append(out, t)
	}
	return out
}
