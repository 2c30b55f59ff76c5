package stats

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// WriteJSON writes v as indented JSON to path, creating its directory:
// how every benchmark report is saved. It returns the error of the first
// step that failed.
func WriteJSON(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("bench: encode report: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}

// LoadAverages returns the 1-, 5- and 15-minute load averages as
// /proc/loadavg writes them ("0.52 0.58 0.59"), or "" where there is no
// such file: others share the machine, and a report says how busy it was.
func LoadAverages() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// LoadAverage returns the 1-minute load average, or 0 when unreadable.
func LoadAverage() float64 {
	first, _, _ := strings.Cut(LoadAverages(), " ")
	v, _ := strconv.ParseFloat(first, 64)
	return v
}
