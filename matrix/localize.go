package matrix

type localizer struct{}
