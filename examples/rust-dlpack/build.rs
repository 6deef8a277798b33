//! Compiles the C producer (`c/producer.c`) into a static library linked into the program.

fn main() {
    println!("cargo:rerun-if-changed=c/producer.c");
    cc::Build::new()
        .file("c/producer.c")
        .warnings(true)
        .extra_warnings(true)
        .compile("producer");
}
