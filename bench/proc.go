package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ProcUsage is what /proc says of a process: resident memory now and at its peak,
// and CPU time used.
type ProcUsage struct {
	RSSMB     float64 `json:"rss_mb"`
	PeakRSSMB float64 `json:"peak_rss_mb"`
	CPUSec    float64 `json:"cpu_seconds"`
}

// clockTicks is USER_HZ, which Linux fixes at 100 for /proc/<pid>/stat.
const clockTicks = 100

// ReadProc reads pid's memory and CPU from /proc (Linux only).
func ReadProc(pid int) (ProcUsage, error) {
	var u ProcUsage
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, fmt.Errorf("bench: read process status: %w", err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		switch k {
		case "VmRSS":
			u.RSSMB = kb / 1024
		case "VmHWM":
			u.PeakRSSMB = kb / 1024
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, fmt.Errorf("bench: read process stat: %w", err)
	}
	// Fields after the command name (which may hold spaces) start after ") ".
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		f := strings.Fields(s[i+1:])
		if len(f) > 12 {
			ut, _ := strconv.ParseFloat(f[11], 64)
			st, _ := strconv.ParseFloat(f[12], 64)
			u.CPUSec = (ut + st) / clockTicks
		}
	}
	return u, nil
}
