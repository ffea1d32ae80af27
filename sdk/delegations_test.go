package sdk_test

import (
	"encoding/json"
	"testing"

	"github.com/spl-dev/spl/sdk"
)

// TestPendingDelegations: a delegation is in flight until a child_result
// from its target to its delegator answers it (by delegationId when both
// name one); values of any type never break the rule.
func TestPendingDelegations(t *testing.T) {
	for _, c := range []struct {
		name   string
		events string
		want   string
	}{
		{"none", `[{"agentId":"lead","type":"message"}]`, `[]`},
		{"one open", `[{"agentId":"lead","type":"delegation","targetAgentId":"cost","content":"estimate"}]`,
			`[{"agentId":"lead","content":"estimate","targetAgentId":"cost","type":"delegation"}]`},
		{"answered", `[{"agentId":"lead","type":"delegation","targetAgentId":"cost"},{"agentId":"lead","childAgentId":"cost","type":"child_result"}]`, `[]`},
		{"a result before its delegation answers nothing", `[{"agentId":"lead","childAgentId":"cost","type":"child_result"},{"agentId":"lead","type":"delegation","targetAgentId":"cost"}]`,
			`[{"agentId":"lead","targetAgentId":"cost","type":"delegation"}]`},
		{"another delegator's result", `[{"agentId":"lead","type":"delegation","targetAgentId":"cost"},{"agentId":"legal","childAgentId":"cost","type":"child_result"}]`,
			`[{"agentId":"lead","targetAgentId":"cost","type":"delegation"}]`},
		{"two to one target, one result: the oldest answered", `[{"agentId":"lead","type":"delegation","targetAgentId":"cost","content":"a"},{"agentId":"lead","type":"delegation","targetAgentId":"cost","content":"b"},{"agentId":"lead","childAgentId":"cost","type":"child_result"}]`,
			`[{"agentId":"lead","content":"b","targetAgentId":"cost","type":"delegation"}]`},
		{"by delegationId", `[{"agentId":"lead","type":"delegation","targetAgentId":"cost","delegationId":"d1"},{"agentId":"lead","type":"delegation","targetAgentId":"cost","delegationId":"d2"},{"agentId":"lead","childAgentId":"cost","type":"child_result","delegationId":"d2"}]`,
			`[{"agentId":"lead","delegationId":"d1","targetAgentId":"cost","type":"delegation"}]`},
		{"odd values", `[{"agentId":{"a":1},"type":"delegation","targetAgentId":["x"],"delegationId":{"k":[1]}},{"agentId":{"a":1},"childAgentId":["x"],"type":"child_result","delegationId":{"k":[1]}}]`,
			`[{"agentId":{"a":1},"delegationId":{"k":[1]},"targetAgentId":["x"],"type":"delegation"}]`},
		{"no target", `[{"agentId":"lead","type":"delegation"}]`, `[]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var events []map[string]any
			if err := json.Unmarshal([]byte(c.events), &events); err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(sdk.PendingDelegations(events))
			if err != nil || string(got) != c.want {
				t.Fatalf("got %s (%v), want %s", got, err, c.want)
			}
		})
	}
}

// TestPauseFindsPendingDelegations: a pause records the delegations the
// transcript leaves open, unless it is told them; what it is told must be
// objects.
func TestPauseFindsPendingDelegations(t *testing.T) {
	c := open(t, sdk.WithActor(agentActor))
	emitTranscript(t, c, "th_deleg")
	p, err := c.PauseSession(ctxT(t), "th_deleg", "", sdk.PauseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(p.Pause.PendingDelegations)
	// lead's delegations to cost and legal are open; cost's to sub was answered.
	if want := `[{"agentId":"lead","content":"estimate","targetAgentId":"cost","type":"delegation"},{"agentId":"lead","content":"review","targetAgentId":"legal","type":"delegation"}]`; string(got) != want {
		t.Fatalf("pending delegations %s, want %s", got, want)
	}
	told, err := c.PauseSession(ctxT(t), "th_deleg", "", sdk.PauseOptions{PendingDelegations: []any{map[string]any{"to": "ops"}}})
	if err != nil || len(told.Pause.PendingDelegations) != 1 {
		t.Fatalf("told: %+v %v", told.Pause.PendingDelegations, err)
	}
	if _, err := c.PauseSession(ctxT(t), "th_deleg", "", sdk.PauseOptions{PendingDelegations: []any{"ops"}}); !isField(err, "pendingDelegations[0]") {
		t.Fatalf("a delegation that is no object: %v", err)
	}
}
