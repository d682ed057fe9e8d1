package core

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"
)

func TestDayTTL(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	sh, _ := time.LoadLocation("Asia/Shanghai")
	tests := []struct {
		name string
		now  time.Time
		loc  *time.Location
		want time.Duration
	}{
		{"noon UTC", time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC), time.UTC, 12 * time.Hour},
		{"last second", time.Date(2026, 12, 2, 23, 59, 59, 0, time.UTC), time.UTC, time.Second},
		{"last instant", time.Date(2026, 12, 2, 23, 59, 59, 999_999_999, time.UTC), time.UTC, time.Millisecond},
		{"midnight", time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), time.UTC, 24 * time.Hour},
		{"spring forward: 23 h day", time.Date(2026, 3, 8, 0, 0, 0, 0, ny), ny, 23 * time.Hour},
		{"fall back: 25 h day", time.Date(2026, 11, 1, 0, 0, 0, 0, ny), ny, 25 * time.Hour},
		{"fall back, after the repeat", time.Date(2026, 11, 1, 12, 0, 0, 0, ny), ny, 12 * time.Hour},
		{"UTC instant, Shanghai day", time.Date(2026, 12, 2, 16, 0, 0, 0, time.UTC), sh, 24 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := dayTTL(tt.now, tt.loc); got != tt.want {
				t.Errorf("dayTTL(%s) = %s, want %s", tt.now, got, tt.want)
			}
		})
	}
	// A store's reads share one day's bounds: the same answers, whatever
	// day and zone the read before was in.
	var today atomic.Pointer[dayBounds]
	for range 3 {
		for _, k := range rand.Perm(len(tests)) {
			tt := tests[k]
			e := &env{now: tt.now, loc: tt.loc, today: &today}
			if got := e.dayTTL(tt.loc); got != tt.want {
				t.Errorf("%s: env.dayTTL(%s) = %s, want %s", tt.name, tt.now, got, tt.want)
			}
		}
	}
}

// dayEnd counts calendar days: DST days last 23 or 25 hours.
func TestDayEndMatchesCalendar(t *testing.T) {
	ny, _ := time.LoadLocation("America/New_York")
	for _, tt := range []struct {
		now  time.Time
		loc  *time.Location
		n    int
		want time.Duration
	}{
		{time.Date(2026, 11, 1, 0, 0, 0, 0, ny), ny, 1, 25 * time.Hour},
		{time.Date(2026, 3, 8, 0, 0, 0, 0, ny), ny, 1, 23 * time.Hour},
		{time.Date(2026, 3, 7, 12, 0, 0, 0, ny), ny, 2, 12*time.Hour + 23*time.Hour},
		{time.Date(2026, 12, 2, 23, 59, 0, 0, time.UTC), time.UTC, 1, time.Minute},
	} {
		if got := dayEnd(tt.now, tt.loc, tt.n).Sub(tt.now); got != tt.want {
			t.Errorf("dayEnd(%s, %d) = %s, want %s", tt.now, tt.n, got, tt.want)
		}
	}
}
