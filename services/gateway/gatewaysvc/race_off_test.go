//go:build !race

package gatewaysvc

const raceEnabled = false
