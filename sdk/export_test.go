package sdk

import "github.com/nats-io/nats.go/jetstream"

// JetStreamOf is the client's JetStream handle, for tests that damage
// the log behind spl's back or inspect its buckets.
func JetStreamOf(c *Client) jetstream.JetStream { return c.conn.JS }

// CachedHead is the clock at which the client's next save on thread will
// skip reading the thread (0: it will read it).
func CachedHead(c *Client, thread string) uint64 {
	h, _ := c.heads.get(thread)
	return h.clock
}
