package agent

import (
	"slices"
	"testing"

	"github.com/switchboardhq/switchboard/store"
)

// The verb table names a tool for each verb the store lets an endpoint be
// granted, and no other: a verb added to one and not the other fails here.
func TestVerbTableMatchesTheStoresVerbs(t *testing.T) {
	a := &Agent{}
	for _, table := range []struct {
		name  string
		tools []Tool
		want  []string
	}{{"todo", a.todoTools(), store.TodoVerbs()}, {"webhook", a.webhookTools(), store.WebhookVerbs()},
		{"opt-in", a.handOnTools(), store.OptInVerbs()}} {
		var names []string
		for _, tool := range table.tools {
			if tool.Name != tool.Verb {
				t.Errorf("tool %s is granted by verb %s: a verb's tool is named as the verb", tool.Name, tool.Verb)
			}
			names = append(names, tool.Name)
		}
		if !slices.Equal(names, table.want) {
			t.Errorf("%s tools %v, the store's %s verbs %v", table.name, names, table.name, table.want)
		}
	}
}
