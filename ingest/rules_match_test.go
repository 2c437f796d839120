package ingest

import (
	"errors"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/store"
)

// A match value the filter cannot compare (an object or an array) is refused
// when the rules are set: taken, it would match no delivery, and every one
// would be filtered without a word.
func TestRulesMatchRefusesObjectsAndArrays(t *testing.T) {
	for _, rules := range []string{
		`{"filter": {"match": {"/labels": ["bug"]}}}`,
		`{"filter": {"match": {"/pull_request/head": {"ref": "main"}}}}`,
		`{"filter": {"match": {"/labels": []}}}`,
	} {
		_, err := ParseRules([]byte(rules))
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(RulesMessage(err), "a string, number, true, false or null") {
			t.Errorf("%s: %v, want ErrInvalid saying what a match compares", rules, err)
		}
	}
	// What is compared still is taken.
	r, err := ParseRules([]byte(`{"filter": {"match": {"/a": "x", "/b": 1, "/c": true, "/d": null}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if d := r.Apply("push", []byte(`{"a": "x", "b": 1.0, "c": true, "d": null}`)); d.Filtered {
		t.Fatal("a delivery with every matched value was filtered")
	}
}
