use super::*;

pub fn run(sc: Scale) -> Section {
    Section::new(0, "failure", String::new(), &sc.variants())
}
