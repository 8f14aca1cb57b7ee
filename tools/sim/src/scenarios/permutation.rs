use super::*;

pub fn run(sc: Scale) -> Section {
    Section::new(0, "permutation", String::new(), &sc.variants())
}
