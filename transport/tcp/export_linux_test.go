package tcp

// ParkAfter is the gap between inbound bytes after which the loop parks.
const ParkAfter = parkAfter
