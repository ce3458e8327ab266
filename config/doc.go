// Package config loads prober's YAML configuration files: strictly (unknown
// and duplicate keys are errors), then SetDefaults, then Validate, which
// reports every problem at once, each naming the field.
package config
