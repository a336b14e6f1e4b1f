package events

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

// Sub is one subscription. Read C; call Close when done.
type Sub[T any] struct {
	C      chan T
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
	s := &Sub[T]{C: make(chan T, h.buffer), hub: h, topic: topic}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs[topic] == nil {
		h.subs[topic] = map[*Sub[T]]struct{}{}
	}
	h.subs[topic][s] = struct{}{}
	return s
}

// Publish offers v to every subscriber of topic, without blocking.
func (h *Hub[T]) Publish(topic string, v T) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[topic] {
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
	close(s.C)
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
