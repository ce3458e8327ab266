package config

// DecodeAgent and DecodeMatrix are ParseAgent and ParseMatrix without
// Validate: the config a start would run on had validation missed a
// problem. The parity test (start_test.go) feeds them to the runtime's own
// checks.
func DecodeAgent(name string, b []byte) (*Agent, error) { return decode[Agent](name, b) }

// DecodeMatrix is DecodeAgent for the matrix.
func DecodeMatrix(name string, b []byte) (*Matrix, error) { return decode[Matrix](name, b) }

func decode[T any, P file[T]](name string, b []byte) (*T, error) {
	var c T
	if err := decodeStrict(b, &c); err != nil {
		return nil, prefixErrors(name, err)
	}
	P(&c).SetDefaults()
	return &c, nil
}
