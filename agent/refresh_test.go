package agent

import (
	"reflect"
	"testing"

	"github.com/switchboardhq/switchboard/store"
)

// toolInputs changes with every field tools are built from, the webhook
// ceiling's included: a field added to the ceiling fails this test until
// toolInputs reads it. Fields it must not read (identity, rate, times) leave it
// alone.
func TestToolInputsFollowEveryInput(t *testing.T) {
	base := store.Endpoint{ID: 1, AgentID: "a", Verbs: []string{"claim"}, Queues: []string{"q"}, DefaultLeaseTTL: 30,
		Ceiling:      store.WebhookCeiling{MaxWebhooks: 1, Sources: []string{"github"}, Queues: []string{"q"}},
		Capabilities: []string{"m"}, ToolAllow: []string{"m_x"}, ToolDeny: []string{"m_y"}}
	changed := func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Int:
			v.SetInt(v.Int() + 1)
		case reflect.Slice:
			v.Set(reflect.Append(v, reflect.ValueOf("z")))
		default:
			t.Fatalf("a field of kind %s: teach toolInputs (and this test) to read it", v.Kind())
		}
	}
	for _, name := range []string{"Verbs", "Queues", "DefaultLeaseTTL", "Capabilities", "ToolAllow", "ToolDeny"} {
		ep := base
		changed(reflect.ValueOf(&ep).Elem().FieldByName(name))
		if toolInputs(ep) == toolInputs(base) {
			t.Errorf("toolInputs ignores %s", name)
		}
	}
	for i := range reflect.TypeFor[store.WebhookCeiling]().NumField() {
		ep := base
		changed(reflect.ValueOf(&ep.Ceiling).Elem().Field(i))
		if toolInputs(ep) == toolInputs(base) {
			t.Errorf("toolInputs ignores the ceiling's %s", reflect.TypeFor[store.WebhookCeiling]().Field(i).Name)
		}
	}
	// Lists are told apart by where their items fall, not only by the items.
	a, b := base, base
	a.Verbs, a.Queues = []string{"claim", "q"}, nil
	b.Verbs, b.Queues = []string{"claim"}, []string{"q"}
	if toolInputs(a) == toolInputs(b) {
		t.Error("toolInputs runs two lists together")
	}
	other := base
	other.ID, other.AgentID, other.RatePerSecond = 2, "b", 9
	if toolInputs(other) != toolInputs(base) {
		t.Error("toolInputs reads fields tools are not built from")
	}
}
