// The built-in corpus: simple children's stories generated from templates, so that training,
// the demo and the tests run on a fresh machine with no files and no network.
//
// Each story has a shape (a lost toy found again, a hard thing learned by trying, a quarrel over a
// toy settled by sharing, a fear overcome, a hurt animal helped, a present made, a broken rule and an
// apology, a new friend, a rainy day) told with a hero (a child or an animal), often a friend and a
// grown-up, an object, a place, feelings, dialogue and frequently a moral — about 100–200 words,
// like TinyStories. Paragraphs are separated by single newlines (never blank lines), so a story
// written to a text file stays one document under the plain-text rule (text_documents.h).
//
// Determinism: everything comes from Rng (rng.h) seeded by (seed, index); no locale, no standard
// distributions. The same (index, seed) gives the same bytes on every machine and compiler.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace orion::data {

// Story number `index` of the corpus with the given seed (seed 0 is the default corpus).
std::string builtin_story(uint64_t index, uint64_t seed = 0);

// Stories 0..n_stories-1 of the corpus with that seed.
std::vector<std::string> builtin_corpus(size_t n_stories, uint64_t seed = 0);

}  // namespace orion::data
