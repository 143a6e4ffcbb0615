// A build script, so that cargo resolves the [build-dependencies] above.
fn main() {}
