// Package rules holds spl's decisions that are pure functions of what the
// service layer read: given the entries, a rule says what to do, and the
// service layer (sdk) reads, asks the rule, and appends, conditionally on
// what it read where the decision depends on it. Like the fold
// (projections/fold), it imports the standard library and records alone,
// and each rule has script tests in testdata/ (rules_test.go runs them;
// go test -rewrite regenerates their expected output).
//
// The rules, each asked by every face through the service layer:
//
//   - RetentionDrops: which checkpoints of a thread a retention policy
//     drops (testdata/retention.txt).
//   - Parent: the parent of a checkpoint whose body names none, on save
//     and on read alike (testdata/lineage.txt).
//   - Resumable and ResumeFrom: which sessions are to resume, and which
//     checkpoint a resume takes up or why it refuses
//     (testdata/resume.txt).
//   - PolicyHome, PolicyHomes and PoliciesFor: where a retention or
//     redaction policy is stored, and which hold for a thread
//     (testdata/policy.txt).
//
// A session's status is records.SessionStatus, which the fold asks too.
package rules
