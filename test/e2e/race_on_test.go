//go:build race

package e2e

// raceEnabled reports a build with the race detector, which makes the
// console's reads several times slower.
const raceEnabled = true
