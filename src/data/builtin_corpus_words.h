// The vocabulary the built-in corpus draws from (builtin_corpus_words.cpp): characters, objects,
// places, feelings, activities and morals. Internal to the corpus generator.
#pragma once
#include <string>
#include <vector>

namespace orion::data::corpus {

struct Kind {
  std::string noun;  // "girl", "cat"
  bool animal;
};

struct Thing {
  std::string noun;        // "kite"
  std::string where_kept;  // where it is usually found: "in the toy box"
};

struct Activity {
  std::string verb_phrase;  // "fly a kite"  (after "wanted to")
  std::string gerund;       // "flying kites"
  std::string hard_part;    // why it is hard at first: "the wind was too weak"
  std::string fix;          // what helps: "ran fast across the grass"
};

struct Fear {
  std::string thing;    // "the dark"
  std::string comfort;  // what makes it less scary: "a little lamp glowed by the bed"
};

extern const std::vector<std::string> kGirlNames, kBoyNames, kAnimalNames;
extern const std::vector<Kind> kAnimalKinds;
extern const std::vector<std::string> kGrownUps;  // "mom", "dad", "grandma", ...
extern const std::vector<Thing> kThings;
extern const std::vector<std::string> kColors, kSizes;
extern const std::vector<std::string> kPlaces, kHidingSpots;
extern const std::vector<std::string> kHappyFeelings, kBadFeelings;
extern const std::vector<Activity> kActivities;
extern const std::vector<Fear> kFears;
extern const std::vector<std::string> kOpenings, kWeather, kFoods, kSounds, kMorals, kEndings;

}  // namespace orion::data::corpus
