package protocol

// SettingError is a value of one of the settings of PROTOCOL.md §7 that cannot be
// used, returned by the constructor of the package that owns the setting: the Config
// field that holds it documents its name. Setting is the name without dashes or
// environment prefix ("lease", "renew-every"); the binary renders it as the flag and
// the environment variable the value came from.
type SettingError struct {
	Setting string
	Err     error
}

func (e *SettingError) Error() string { return e.Setting + ": " + e.Err.Error() }

func (e *SettingError) Unwrap() error { return e.Err }
