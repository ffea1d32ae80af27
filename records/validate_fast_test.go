package records

import "testing"

// The fast matchers agree with the rules' regular expressions.
func TestFastMatchersAgreeWithPatterns(t *testing.T) {
	acts := []string{"", "A", "AB", "KNOW", "LEARN", "FORGET", "A1", "A_", "1A", "_A", "aB", "Ab", "ABCDEFGHIJKLMNOP", "ABCDEFGHIJKLMNOPQ", "AB-C", "AB C", "AB\n", "ÄB"}
	for _, s := range acts {
		if got, want := validAct(s), actRE.MatchString(s); got != want {
			t.Errorf("validAct(%q) = %v, the pattern says %v", s, got, want)
		}
	}
	kinds := []string{"", "a", "a.b", "agent.session.checkpoint", "core.erasure", "a1_b.c2", "a.", ".a", "a..b", "A", "a.B", "a.1b", "a._b", "a-b", "a b", "a.b\n", "ä", "_a", "a_", "a.b_c.d9"}
	for _, s := range kinds {
		if got, want := validKind(s), kindRE.MatchString(s); got != want {
			t.Errorf("validKind(%q) = %v, the pattern says %v", s, got, want)
		}
	}
}

func FuzzFastMatchers(f *testing.F) {
	for _, s := range []string{"KNOW", "agent.step", "a..b", "AB_9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if validAct(s) != actRE.MatchString(s) {
			t.Fatalf("validAct(%q) disagrees with %s", s, actPattern)
		}
		if validKind(s) != kindRE.MatchString(s) {
			t.Fatalf("validKind(%q) disagrees with %s", s, kindPattern)
		}
	})
}
