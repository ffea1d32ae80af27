package sdk

import "github.com/nats-io/nats.go/jetstream"

// JetStreamOf is the client's JetStream handle, for tests that damage
// the log behind spl's back or inspect its buckets.
func JetStreamOf(c *Client) jetstream.JetStream { return c.conn.JS }
