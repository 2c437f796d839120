-- A release (or an endpoint's revocation) of a todo awaiting approval left its
-- unanswered question on it before release withdrew it (store/leases.go,
-- releaseUnasked): such a pending todo's next worker was handed approval
-- "asked", a question no one could answer any more. Withdraw those questions,
-- as a release now does; an answer stays.
UPDATE todos SET approval = '', approval_question = '' WHERE state = 'pending' AND approval = 'asked';
