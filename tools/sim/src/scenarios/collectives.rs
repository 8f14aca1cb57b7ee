use super::*;

pub fn run(sc: Scale) -> Section {
    Section::new(0, "collectives", String::new(), &sc.variants())
}
