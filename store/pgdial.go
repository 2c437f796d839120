package store

import (
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// A PostgreSQL server that stops answering without closing its connections
// (its host frozen, the network between cut) would hold every statement sent to
// it until TCP gives up, some fifteen minutes: the writer, and every caller
// waiting on it, with it. So each connection is given up once what it sent
// goes unacknowledged for pgDeadPeer, or an idle one's keepalive probes go
// unanswered that long (TCP_USER_TIMEOUT where the kernel has it: see
// setDeadPeer). A statement the server is still running is not bounded: its
// bytes were acknowledged.
const pgDeadPeer = 30 * time.Second

// pgKeepAlive probes an idle connection after 15 s of quiet, then every 5 s.
var pgKeepAlive = net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 3}

// pgDialFunc dials as pgx does, within timeout, with the keepalives above and
// the dead-peer bound on TCP.
func pgDialFunc(timeout time.Duration) pgconn.DialFunc {
	d := &net.Dialer{Timeout: timeout, KeepAliveConfig: pgKeepAlive, Control: setDeadPeer}
	return d.DialContext
}
