use super::*;

pub fn run(sc: Scale) -> Section {
    Section::new(0, "state", String::new(), &sc.variants())
}
