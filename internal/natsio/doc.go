// Package natsio is the JetStream plumbing that log, projections and serve
// share, written once: the connection to the server that holds the log
// (the embedded server of a data directory, started in this process or
// joined, or a remote one), starting a nats-server, the data directory's
// lock, the store's encryption at rest and the checks that refuse a wrong
// or missing key (atrest.go), the reply multiplexer for pipelined and batched requests, direct
// gets, plain, pipelined and atomic publishes, and the fsync of the
// embedded store's message blocks.
//
// It knows nothing of records: its callers give it subjects and bytes.
// Nothing outside this module can import it; programs use log.Open and
// the sdk package.
package natsio
