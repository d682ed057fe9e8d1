package redistest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// Ports handed to servers a test starts come from below the kernel's
// ephemeral range (32768 and up on Linux), so neither an outgoing connection
// nor a listener on port 0 can take one between the moment it is chosen and
// the moment its server binds it. Each port P is taken together with
// P+busOffset, the cluster bus port Redis binds beside a cluster node, so a
// bus port never lands on a port another server was given. Test binaries of
// different packages run at once: each reservation is an flock on a file
// named after the port, held until the binary exits (the kernel drops it
// then, however the binary ends).
const (
	portLow   = 12000
	portHigh  = 22000 // exclusive; P+busOffset stays below 32768
	busOffset = 10000
)

var ports struct {
	sync.Mutex
	held []*os.File // kept open: closing a file drops its lock
}

func freePort() (int, error) {
	dir := filepath.Join(os.TempDir(), "freqcap-test-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	ports.Lock()
	defer ports.Unlock()
	for range 200 {
		port := portLow + rand.IntN(portHigh-portLow)
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			return 0, fmt.Errorf("find a free port: %w", err)
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil || !bindable(port) || !bindable(port+busOffset) {
			f.Close()
			continue
		}
		ports.held = append(ports.held, f)
		return port, nil
	}
	return 0, fmt.Errorf("find a free port: none free in %d-%d after 200 tries", portLow, portHigh-1)
}

// bindable reports whether nothing listens on the loopback port now.
func bindable(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}
