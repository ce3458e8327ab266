package matrix

// Racks returns the rack inferred for each node from its agent's first
// hop. Until agents report first hops it knows none.
func (m *Matrix) Racks() map[string]string { return nil }
