package bigdata

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Memory is a process's resident memory while something ran, from
// /proc/PID/status.
type Memory struct {
	// BaselineMB is VmRSS just before; PeakMB the highest VmRSS sampled
	// during; EndMB the last sample.
	BaselineMB float64 `json:"baseline_rss_mb"`
	PeakMB     float64 `json:"peak_rss_mb"`
	EndMB      float64 `json:"end_rss_mb"`
	// VmHWM is the kernel's own peak since the process started: it
	// catches a spike between samples, but also remembers earlier ones.
	HWMBeforeMB float64 `json:"vmhwm_before_mb"`
	HWMAfterMB  float64 `json:"vmhwm_after_mb"`
	Samples     int     `json:"samples"`
	EveryMS     int     `json:"sample_every_ms"`
	// PerSecondMB is the highest VmRSS of each second, for a plot.
	PerSecondMB []float64 `json:"per_second_peak_rss_mb"`
}

// procStatus is what memory sampling reads from /proc/PID/status.
type procStatus struct {
	RSSKB, HWMKB int64
}

// parseProcStatus reads VmRSS and VmHWM (in kB) from the text of
// /proc/PID/status. It fails when either is missing.
func parseProcStatus(b []byte) (procStatus, error) {
	var st procStatus
	var haveRSS, haveHWM bool
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		f := strings.Fields(val)
		if len(f) != 2 || f[1] != "kB" {
			return st, fmt.Errorf("bigdata: /proc status: %s is %q, want a number of kB", name, strings.TrimSpace(val))
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return st, fmt.Errorf("bigdata: /proc status: %s: %w", name, err)
		}
		if name == "VmRSS" {
			st.RSSKB, haveRSS = n, true
		} else {
			st.HWMKB, haveHWM = n, true
		}
	}
	if !haveRSS || !haveHWM {
		return st, fmt.Errorf("bigdata: /proc status: VmRSS or VmHWM missing (a kernel thread, or the process exited?)")
	}
	return st, nil
}

func readProcStatus(pid int) (procStatus, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procStatus{}, err
	}
	return parseProcStatus(b)
}

func kbToMB(kb int64) float64 { return float64(kb) / 1024 }

// memSampler samples a process's VmRSS until stopped.
type memSampler struct {
	pid   int
	every time.Duration
	done  chan struct{}
	wg    sync.WaitGroup
	mem   Memory
	start time.Time
}

// startMemSampler takes the baseline reading and starts sampling every
// interval. It fails when the process cannot be read.
func startMemSampler(pid int, every time.Duration) (*memSampler, error) {
	st, err := readProcStatus(pid)
	if err != nil {
		return nil, err
	}
	s := &memSampler{pid: pid, every: every, done: make(chan struct{}), start: time.Now()}
	s.mem = Memory{BaselineMB: kbToMB(st.RSSKB), HWMBeforeMB: kbToMB(st.HWMKB), PeakMB: kbToMB(st.RSSKB),
		EndMB: kbToMB(st.RSSKB), EveryMS: int(every / time.Millisecond)}
	s.wg.Go(s.loop)
	return s, nil
}

func (s *memSampler) loop() {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			s.sample()
		}
	}
}

func (s *memSampler) sample() {
	st, err := readProcStatus(s.pid)
	if err != nil {
		return // a missed sample must not end the measurement
	}
	mb := kbToMB(st.RSSKB)
	s.mem.Samples++
	s.mem.EndMB = mb
	s.mem.PeakMB = max(s.mem.PeakMB, mb)
	s.mem.HWMAfterMB = kbToMB(st.HWMKB)
	sec := int(time.Since(s.start) / time.Second)
	for len(s.mem.PerSecondMB) <= sec {
		s.mem.PerSecondMB = append(s.mem.PerSecondMB, 0)
	}
	s.mem.PerSecondMB[sec] = max(s.mem.PerSecondMB[sec], mb)
}

// stop ends sampling after one last reading and returns what it saw.
func (s *memSampler) stop() Memory {
	close(s.done)
	s.wg.Wait()
	s.sample()
	return s.mem
}
