// Package buildinfo says which build a binary is: the commit it was built
// from (Go's embedded VCS stamp, or -ldflags "-X ...buildinfo.Commit=..."
// where the build has no .git, as in the Docker images), and exports it
// as the metric freqcap_build_info.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Release is freqcap's version: each has its section in CHANGELOG.md.
const Release = "0.9.0"

// Commit is set at link time by builds without VCS data.
var Commit string

// Info is what a binary knows of its build.
type Info struct {
	Commit   string // "unknown" when neither VCS data nor Commit say
	Time     string // commit time, RFC 3339, when known
	Modified bool   // built from a tree with uncommitted changes
	Go       string
}

// Read returns the binary's build information.
func Read() Info {
	i := Info{Commit: "unknown", Go: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				i.Commit = s.Value
			case "vcs.time":
				i.Time = s.Value
			case "vcs.modified":
				i.Modified = s.Value == "true"
			}
		}
	}
	if Commit != "" {
		i.Commit = Commit
	}
	return i
}

// String is the --version line of service.
func (i Info) String() string {
	s := i.Commit
	if i.Modified {
		s += " (modified)"
	}
	if i.Time != "" {
		s += ", committed " + i.Time
	}
	return s + ", " + i.Go
}

// Version is service's --version line: the release, then the build.
func Version(service string) string { return fmt.Sprintf("%s %s %s", service, Release, Read()) }

// Register exports freqcap_build_info{service, version, commit, modified,
// go_version} = 1.
func Register(reg prometheus.Registerer, service string) {
	i := Read()
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "freqcap_build_info",
		Help: "The build of the running binary: always 1, the labels say which.",
		ConstLabels: prometheus.Labels{
			"service": service, "version": Release, "commit": i.Commit, "modified": fmt.Sprint(i.Modified), "go_version": i.Go,
		},
	}, func() float64 { return 1 }))
}
