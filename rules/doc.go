// Package rules holds spl's decisions that are pure functions of what the
// service layer read: given the entries, a rule says what to do, and the
// service layer (sdk) reads, asks the rule, and appends. Like the fold
// (projections/fold), it imports the standard library and records alone,
// and each rule has script tests in testdata/ (rules_test.go runs them).
package rules
