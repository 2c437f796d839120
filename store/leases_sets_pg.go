package store

// Claims and completes for many in one statement, for a pipelined batch
// (pipeline_sets.go). Each is the statement of one (pgClaimGated, pgComplete)
// made to take arrays: the same checks, the same audit rows, the same columns,
// with the write's place in front.

// pgClaimSet claims, for each of several claims on one queue, what
// pgClaimGated would claim for it: what todos_lock_claims (migration 0023)
// assigns to the claims whose write they follow succeeded. A claim left without
// a todo gets no row: nothing claimable.
const pgClaimSet = `WITH req AS (SELECT * FROM unnest(?::text[], ?::bigint[], ?::bigint[], ?::bigint[])
		WITH ORDINALITY AS r(r_owner, r_ttl, r_after, r_after_seq, r_n)
		WHERE r_after = 0 OR EXISTS (SELECT 1 FROM todos g WHERE g.id = r_after AND ` + pgClaimAfterSet + `)),
	assigned AS (SELECT n AS r_n, id AS a_id FROM todos_lock_claims(?, ?,
		ARRAY(SELECT r_n FROM req ORDER BY r_n), ARRAY(SELECT r_owner FROM req ORDER BY r_n))),
	claimed AS (UPDATE todos SET state = 'claimed', owner = r_owner, attempts = attempts + 1,
			lease_seq = lease_seq + 1, lease_expires_at = ? + r_ttl, updated_at = ?, reserved_for = NULL
		FROM assigned JOIN req USING (r_n) WHERE todos.id = ANY(ARRAY(SELECT a_id FROM assigned)) AND todos.id = a_id AND todos.state || '' = 'pending'
		RETURNING r_n, ` + pgTodoColumnsFull + `),
	logged AS (INSERT INTO audit (at, actor, action, target, outcome, detail)
		SELECT ?, r_owner, 'todo.claim_next', 'todo:' || id, 'ok',
			'attempt=' || attempts || ' lease_seq=' || lease_seq FROM claimed JOIN req USING (r_n))
	SELECT * FROM claimed`

// pgClaimAfterSet is pgClaimAfter for a claim of the set, whose write it follows
// is r_after (0: it follows none).
const pgClaimAfterSet = `g.lease_seq = r_after_seq AND ` + pgChangedHere

// pgClaimSetKind takes elems of (queue, owner, ttl in ms, the id and lease_seq
// of the ack it follows or 0, 0); the queue is the set's key, the same for each.
var pgClaimSetKind = &pgSetKind{query: pgClaimSet, args: func(now int64, elems [][]any) []any {
	queue := elems[0][0].(string)
	n := len(elems)
	owners, ttls, after, afterSeq := make([]string, n), make([]int64, n), make([]int64, n), make([]int64, n)
	for i, e := range elems {
		owners[i], ttls[i], after[i], afterSeq[i] = e[1].(string), e[2].(int64), e[3].(int64), e[4].(int64)
	}
	return []any{owners, ttls, after, afterSeq, queue, now, now, now, now}
}}

// pgCompleteSet is pgComplete for several acks. A write's scope (its Ack's
// Queues) is in the scope arrays, beside its place. The same todo twice is
// completed once; the other ack finds the lease changed, as after another's
// complete. The todos are found by id alone (the ids again as an array; state
// and lease_expires_at written so that no index serves them): otherwise, with
// statistics older than the queue's churn, PostgreSQL read todos_leases whole,
// every lease since its last vacuum included (2,004 entries for 4 acks).
const pgCompleteSet = `WITH req AS (SELECT * FROM unnest(?::bigint[], ?::text[], ?::bigint[], ?::text[], ?::boolean[])
			WITH ORDINALITY AS r(r_id, r_owner, r_seq, r_result, r_all, r_n)),
	scopes AS (SELECT * FROM unnest(?::bigint[], ?::text[]) AS s(s_n, s_queue)),
	changed AS (UPDATE todos SET state = 'done', result = r_result, lease_expires_at = NULL, updated_at = ?, finished_at = ?
		FROM req WHERE todos.id = ANY(?::bigint[]) AND todos.id = r_id AND todos.state || '' = 'claimed'
			AND todos.owner = r_owner AND todos.lease_seq = r_seq AND todos.lease_expires_at + 0 > ?
			AND (r_all OR EXISTS (SELECT 1 FROM scopes WHERE s_n = r_n AND s_queue = todos.queue))
		RETURNING r_n, ` + todoColumns + `),
	logged AS (INSERT INTO audit (at, actor, action, target, outcome, detail)
		SELECT ?, r_owner, 'todo.complete', 'todo:' || id, 'ok', '' FROM changed JOIN req USING (r_n) RETURNING id),
	` + pgKeyNext + `	SELECT changed.*, 1, 0, x_id, x_source, x_available, f_id FROM changed
		LEFT JOIN nx ON front = changed.id
	UNION ALL SELECT r_n, ` + todoColumns + `, 0, 0, NULL, NULL, NULL, NULL FROM req JOIN todos ON todos.id = r_id
		WHERE todos.id = ANY(ARRAY(SELECT r_id FROM req)) AND r_n NOT IN (SELECT r_n FROM changed)`

// pgCompleteSetKind takes elems of (id, owner, lease_seq, result, queues).
var pgCompleteSetKind = &pgSetKind{query: pgCompleteSet, args: func(now int64, elems [][]any) []any {
	n := len(elems)
	ids, owners, seqs, results, all := make([]int64, n), make([]string, n), make([]int64, n), make([]string, n), make([]bool, n)
	var scopeN []int64
	scopeQ := []string{}
	for i, e := range elems {
		ids[i], owners[i], seqs[i], results[i] = e[0].(int64), e[1].(string), e[2].(int64), e[3].(string)
		queues := e[4].([]string)
		all[i] = queues == nil
		for _, q := range queues {
			scopeN, scopeQ = append(scopeN, int64(i+1)), append(scopeQ, q)
		}
	}
	if scopeN == nil {
		scopeN = []int64{}
	}
	return []any{ids, owners, seqs, results, all, scopeN, scopeQ, now, now, ids, now, now, now}
}}
