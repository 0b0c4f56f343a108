// Package config reads sluice's YAML configuration file and the route
// flags of `sluice serve` into one validated Config.
//
// Every error names the file, the key (as a path such as
// routes[1].protocol) and the bad value, so a user can fix the file
// without guessing. Unknown keys are errors too: a misspelt option must
// not be silently ignored. Nothing here touches the network or starts
// anything; the caller applies a Config it has been given whole.
package config
