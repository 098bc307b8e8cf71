//go:build race

package gatewaysvc

// raceEnabled reports a build with the race detector, which makes
// encoding a 20 MB body many times slower.
const raceEnabled = true
