package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Write requests: what a caller hands the writer (writer.go), and how it waits for
// the answer. A request is answered once the commit that holds it is durable, or
// with the error that kept it out.

// writeReq is one write handed to the writer: a function, a raw statement, or
// (on PostgreSQL) one statement that can be pipelined.
type writeReq struct {
	ctx context.Context
	fn  func(*wtx) error
	raw func(*sql.Conn) error // runs alone, outside any transaction (checkpoints, VACUUM INTO)
	one *pgOne                // on PostgreSQL, fn as one statement that can be pipelined (pipeline.go)
	// again: fn may run again in a later transaction of the same batch (at the
	// same time), or in the same one (as rerun), and leaves the same outcome:
	// it writes only through its wtx and sets its results afresh on each run.
	// Such writes share a transaction without savepoints on SQLite (see bare).
	again bool
	// rerun: fn may run again from its start in the same transaction, once the
	// transaction is back at the savepoint of the write before it, whose
	// statements its first run's round trip carried and which failed; on
	// PostgreSQL only such a write (or an again one) carries them (wtxlater.go).
	rerun bool
	// follow runs right after this request, in the same transaction, and only
	// if this one succeeded (lead is its way back); see submitThen.
	follow, lead *writeReq
	err          error
	wtx          wtx
	done         chan struct{}
}

// write runs fn in the next group commit and returns fn's error, or the commit's.
// Once a request is accepted the caller waits for its commit even if ctx ends, so
// that an answer never says "failed" about work that was committed.
func (s *Store) write(ctx context.Context, fn func(*wtx) error) error {
	return s.submit(ctx, fnReq(ctx, fn))
}

// fnReq is fn's write request, for write or submitThen.
func fnReq(ctx context.Context, fn func(*wtx) error) *writeReq {
	return &writeReq{ctx: ctx, fn: fn, done: make(chan struct{})}
}

// rerunReq is fnReq for an fn that may run again in its transaction
// (writeReq.rerun).
func rerunReq(ctx context.Context, fn func(*wtx) error) *writeReq {
	r := fnReq(ctx, fn)
	r.rerun = true
	return r
}

// againReq is fnReq for an fn that may run again (writeReq.again).
func againReq(ctx context.Context, fn func(*wtx) error) *writeReq {
	r := fnReq(ctx, fn)
	r.again = true
	return r
}

// exclusive runs fn on the writer's connection between batches, outside any
// transaction, for statements that cannot run inside one.
func (s *Store) exclusive(ctx context.Context, fn func(*sql.Conn) error) error {
	return s.submit(ctx, &writeReq{ctx: ctx, raw: fn, done: make(chan struct{})})
}

func (s *Store) submit(ctx context.Context, req *writeReq) error {
	if err := s.send(ctx, req); err != nil {
		return err
	}
	<-req.done
	return req.err
}

// send hands req (and its follow-up) to the writer without waiting for it.
func (s *Store) send(ctx context.Context, req *writeReq) error {
	if s.writer == nil {
		return fmt.Errorf("store: %s was opened read-only", s.path)
	}
	w := s.writer
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	// Holding mu while sending keeps close from racing a send; the channel is
	// buffered to MaxBatch so this blocks only under heavy load.
	select {
	case w.reqs <- req:
	case <-ctx.Done():
		w.mu.Unlock()
		return ctx.Err()
	}
	w.mu.Unlock()
	return nil
}

// submitThen submits lead and, in the same transaction right after it, follow,
// which runs only if lead succeeded; a follow that did not run fails with
// errLeadFailed. It returns lead's error; follow's is follow.err. Both are
// answered after the one commit that holds them: a worker's complete and the
// claim of its next todo cost one durable write, not two.
func (s *Store) submitThen(ctx context.Context, lead, follow *writeReq) error {
	lead.follow, follow.lead = follow, lead
	if err := s.send(ctx, lead); err != nil {
		follow.err = errLeadFailed
		return err
	}
	<-lead.done
	<-follow.done
	return lead.err
}

// errLeadFailed is a follow-up's error when the write it followed failed.
var errLeadFailed = errors.New("store: not run: the write it followed failed")

// withFollow appends r, and its follow-up if it has one, to batch.
func (r *writeReq) withFollow(batch []*writeReq) []*writeReq {
	batch = append(batch, r)
	if r.follow != nil {
		batch = append(batch, r.follow)
	}
	return batch
}
