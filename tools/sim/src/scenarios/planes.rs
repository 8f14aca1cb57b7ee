use super::*;

pub fn run(sc: Scale) -> Section {
    Section::new(0, "planes", String::new(), &sc.variants())
}
