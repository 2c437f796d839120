package metrics

import (
	"testing"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
)

// A host name is bytes (sethostname takes any): one that is not UTF-8 must not
// stop serve from starting (a Prometheus label value must be UTF-8, and
// MustRegister panics on one that is not); it is exported with its bad bytes
// replaced.
func TestProcessInfoWithAHostNameThatIsNotUTF8(t *testing.T) {
	m := &Metrics{reg: prometheus.NewRegistry()}
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("WatchProcess panicked: %v", p)
			}
		}()
		m.WatchProcess("abc", "bad\xffhost", "v1", func() bool { return true })
	}()
	families, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "switchboard_process_info" {
			continue
		}
		for _, l := range f.GetMetric()[0].GetLabel() {
			if l.GetName() == "host" {
				if !utf8.ValidString(l.GetValue()) || l.GetValue() != "bad\uFFFDhost" {
					t.Fatalf("host label %q", l.GetValue())
				}
				return
			}
		}
	}
	t.Fatal("no switchboard_process_info with a host label")
}
