package bench

// A fleet: several Switchboard processes on one database. The bench spreads its
// agents and senders over them round robin, and measures the doorbell across
// processes: a todo added through the first rings sessions on the others.

// processes is how many processes t names.
func (t Target) processes() int { return 1 + len(t.More) }

// urls is every process's base URL, the first first.
func (t Target) urls() []string { return append([]string{t.URL}, t.More...) }

// on is t with the base URL of process i (round robin over them).
func (t Target) on(i int) Target {
	t.URL = t.urls()[i%t.processes()]
	return t
}

// bellSession is where the doorbell's i-th session listens: on a process other
// than the first, which the doorbell's deliveries go to, when there are several.
func (t Target) bellSession(i int) Target {
	if t.processes() == 1 {
		return t
	}
	return t.on(1 + i%(t.processes()-1))
}

// senderURL is the ingest URL hookURL (on the first process) on the process
// sender g uses.
func senderURL(hookURL string, bases []string, g int) (string, error) {
	if len(bases) < 2 {
		return hookURL, nil
	}
	return ingestURL(bases[g%len(bases)], hookURL)
}
