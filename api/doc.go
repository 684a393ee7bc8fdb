// Package api is the Go client of foreman's REST API (docs/api.md): the
// types a caller needs and a Client with a context on every call. It
// imports no other package of this module and nothing beyond the standard
// library, so a program that submits jobs does not compile the server
// (raft, bbolt, runc, gossip, metrics); TestNoServerDependencies keeps it
// so.
//
// Start with NewClient (a zero Config reads FOREMAN_ADDR, FOREMAN_TOKEN,
// FOREMAN_NAMESPACE and the FOREMAN_CACERT/_CLIENT_CERT/_CLIENT_KEY TLS
// files), then SubmitJob, WaitJob and Logs:
//
//	c, err := api.NewClient(api.Config{})
//	sub, err := c.SubmitJob(ctx, api.JobSpec{Name: "hello", Command: []string{"echo", "hello"}})
//	job, err := c.WaitJob(ctx, sub.ID, nil)
//	err = c.Logs(ctx, sub.ID, api.LogQuery{}, os.Stdout)
//
// # Retries
//
// A call retries on its own only where a retry cannot do a thing twice
// (see Client): after a 429 it waits the server's Retry-After; reads, and
// submits, which always carry an idempotency key (the caller's or one
// made here), are sent again after a broken connection or a 502, 503 or
// 504. Other writes return the error: their outcome may be unknown.
//
// The operator's routes (snapshots, raft peers, gossip keys, the
// internal secret) have methods too (operator.go): the foreman CLI is
// written on this package. A route without a method goes through Do and
// Open, with the same address, token, namespace and retries.
// Config.FailFast turns off the retries of unknown outcomes, for
// interactive tools.
//
// # Errors
//
// A non-2xx answer is an *Error carrying the HTTP status, the server's
// code and its message (and, for an invalid request, the field). Match
// codes with errors.Is and the sentinels (ErrNotFound, ErrConflict, ...),
// or read the fields with errors.As. A request that got no answer is a
// *ConnectionError.
//
// # Events
//
// Events returns the cluster's event stream as an iter.Seq2; it resumes
// after the last delivered event ID when the connection breaks, so a
// reader neither loses nor repeats events. A reset event says the server
// could not resume there: re-read what you cache.
//
// # Wire shapes
//
// The types mirror the schemas of httpapi/openapi.yaml, the checked-in
// OpenAPI description of every route; TestTypesMatchOpenAPI fails when a
// type and its schema disagree on a field, and httpapi's contract test
// holds the server to the same description. A reply decoded into these
// types and encoded again is the server's JSON byte for byte, in its
// field order (httpapi's TestAPITypesKeepServerJSON), which is what the
// CLI's --json prints. A spec read back (Job.Spec) can be submitted again.
package api
