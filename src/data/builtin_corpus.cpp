// Story generation: a tiny template language plus one function per story shape.
//
// Templates are plain sentences with {slots}: {hero} {he} {him} {his} {kind} for the hero,
// {friend} {fhe} {fhim} {fhis} for the friend, {adult} for a grown-up, {obj} (an object with its
// colour), {place}, {spot}, {feel}, {bad}, {food}, {sound}, {they}, ... A slot written with a capital
// letter ({He}) is capitalised. Each sentence of a shape is picked from a few variants, so the
// number of distinct sentences is the product of variants × the words filling them (tens of
// thousands), while the stories keep a real structure for a model to learn: who did what, why,
// and what happened next.
#include "data/builtin_corpus.h"

#include <utility>

#include "base/error.h"
#include "data/builtin_corpus_words.h"
#include "data/rng.h"

namespace orion::data {
namespace {

using namespace corpus;
using Variants = std::vector<std::string>;

std::string capitalize(std::string s) {
  if (!s.empty() && s[0] >= 'a' && s[0] <= 'z') s[0] = char(s[0] - 'a' + 'A');
  return s;
}

std::string with_article(const std::string& noun_phrase) {
  const char c = noun_phrase.empty() ? 'x' : noun_phrase[0];
  const bool vowel = c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u';
  return (vowel ? "an " : "a ") + noun_phrase;
}

// A person or animal in the story, with the pronouns the templates need.
struct Character {
  std::string name, kind;  // "Lily", "girl"
  std::string he, him, his;
};

Character make_character(Rng& rng, bool allow_animal) {
  const int roll = int(rng.below(allow_animal ? 10 : 6));
  if (roll < 3) return {rng.pick(kGirlNames), "girl", "she", "her", "her"};
  if (roll < 6) return {rng.pick(kBoyNames), "boy", "he", "him", "his"};
  const bool female = rng.chance(50);
  return {rng.pick(kAnimalNames), rng.pick(kAnimalKinds).noun, female ? "she" : "he", female ? "her" : "him",
          female ? "her" : "his"};
}

// One story being written: the slot values and the text so far.
class Story {
 public:
  explicit Story(Rng& rng) : rng_(rng) {}
  Rng& rng() { return rng_; }

  void set(const std::string& slot, std::string value) {
    for (auto& [k, v] : slots_)
      if (k == slot) {
        v = std::move(value);
        return;
      }
    slots_.emplace_back(slot, std::move(value));
  }
  void set_character(const std::string& prefix, const Character& c) {
    set(prefix.empty() ? "hero" : "friend", c.name);
    set(prefix + "kind", c.kind);
    set(prefix + "he", c.he);
    set(prefix + "him", c.him);
    set(prefix + "his", c.his);
  }

  // Appends one of the variants, slots filled, followed by a space.
  void say(const Variants& variants) { append(expand(rng_.pick(variants))); }
  // The same, only with the given probability (percent).
  void maybe(int percent, const Variants& variants) {
    if (rng_.chance(percent)) say(variants);
  }
  void paragraph() {
    while (!text_.empty() && text_.back() == ' ') text_.pop_back();
    if (!text_.empty()) text_ += '\n';
  }
  std::string finish() {
    while (!text_.empty() && (text_.back() == ' ' || text_.back() == '\n')) text_.pop_back();
    return std::move(text_);
  }

 private:
  void append(const std::string& sentence) {
    text_ += sentence;
    text_ += ' ';
  }
  std::string expand(const std::string& tmpl) const {
    std::string out;
    for (size_t i = 0; i < tmpl.size(); ++i) {
      if (tmpl[i] != '{') {
        out += tmpl[i];
        continue;
      }
      const size_t close = tmpl.find('}', i);
      ORION_CHECK(close != std::string::npos, "unclosed slot in template '{}'", tmpl);
      std::string name = tmpl.substr(i + 1, close - i - 1);
      const bool upper = !name.empty() && name[0] >= 'A' && name[0] <= 'Z';
      if (upper) name[0] = char(name[0] - 'A' + 'a');
      out += upper ? capitalize(lookup(name)) : lookup(name);
      i = close;
    }
    return out;
  }
  const std::string& lookup(const std::string& name) const {
    for (const auto& [k, v] : slots_)
      if (k == name) return v;
    ORION_CHECK(false, "template slot '{}' has no value", name);
    return slots_[0].second;
  }

  Rng& rng_;
  std::vector<std::pair<std::string, std::string>> slots_;
  std::string text_;
};

// A sentence or two about the day and the place.
void scene(Story& s) {
  s.maybe(75, {"The sun was shining, and the birds were singing.", "The {place} was full of flowers and tall trees.",
               "It was a {weather} day, and the air smelled fresh.", "There were many children playing at the {place}.",
               "The wind was soft, and the leaves were dancing.", "Everything looked {color} and bright."});
}

// The last lines: a moral and an ending, each often but not always.
void closing(Story& s) {
  s.maybe(65, {"{He} learned that {moral}.", "That day, {hero} learned that {moral}.",
               "{Hero}'s {adult} told {him}, \"Remember, {moral}.\""});
  s.maybe(75, {"{Ending}"});
}

// The opening every shape shares: when, who, where, and a little about the hero.
void introduce(Story& s) {
  s.say({"{Opening} there was {intro}.", "{Opening} {intro} lived near a {weather} {place}.",
         "{Opening} {intro} went to the {place} with {his} {adult}."});
  s.say({"{He} was {trait_a} {kind} who loved {gerund}.", "{Hero} was {trait} and liked to eat {food_a} every day.",
         "{He} lived in a small house with {his} {adult}.", "{Hero} was {trait_a} {kind} with a big heart."});
  s.say({"{He} had {obj_a} that {he} loved very much.", "Every day, {he} played in the {place}.",
         "{His} best friend was {fdesc}.", "{He} always kept {his} {obj} {keep}."});
  scene(s);
  s.maybe(50, {"{He} liked to sing little songs while {he} played.", "{His} {adult} often read {him} stories at night.",
               "{He} was always ready for a new adventure.", "{He} liked to help {his} {adult} in the kitchen."});
}

// Sets the moral a shape ends with, chosen among the ones that fit it (indices into kMorals).
void moral(Story& s, std::initializer_list<int> fitting) {
  std::vector<int> v(fitting);
  s.set("moral", kMorals[v[s.rng().below(v.size())]]);
}

void lost_object(Story& s) {
  moral(s, {4, 5});
  introduce(s);
  s.say({"One day, {he} could not find {his} {obj}.", "When {he} came back, {his} {obj} was gone!",
         "{He} looked {keep}, but the {obj} was not there."});
  s.say({"{Hero} felt very {bad}.", "\"Where is my {obj}?\" {hero} cried.", "{Hero} was so {bad} that {he} began to cry."});
  s.paragraph();
  s.say({"{Fdesc} saw {him} and asked, \"Why are you {bad}?\"", "{His} friend {friend} came to help.",
         "Then {friend} walked by and said, \"I will help you look!\""});
  s.say({"They looked {spot2}.", "First they looked {spot2}, but they found only {food_a}.",
         "They searched the whole {place}."});
  s.say({"At last, {friend} saw something {color} {spot}.", "Then they heard {sound} coming from {spot}.",
         "Suddenly, {hero} saw the {obj} {spot}!"});
  s.say({"It was the {obj}! {Hero} hugged it and smiled.", "There was the {obj}, safe and sound.",
         "{Hero} picked up the {obj} and jumped for joy."});
  s.paragraph();
  s.say({"\"Thank you, {friend}!\" said {hero}. \"You are a good friend.\"", "{Hero} thanked {friend} with a big hug.",
         "{Hero} shared {his} {food} with {friend} to say thank you."});
  s.maybe(50, {"Now {he} always keeps the {obj} {keep}.", "{Hero} and {friend} played with the {obj} all afternoon."});
  closing(s);
}

void learn_activity(Story& s) {
  moral(s, {6, 9, 5});
  introduce(s);
  s.say({"{Hero} wanted to {activity}.", "One day, {hero} said, \"Today I will {activity}!\"",
         "{Hero} saw other children {gerund} and wanted to try too."});
  s.say({"{He} tried, but {hard}.", "It was hard, because {hard}.", "{He} tried again and again, but {hard}."});
  s.say({"{Hero} felt {bad} and sat down.", "\"I can't do it,\" {hero} said with a sigh.",
         "{Hero} was {bad} and wanted to give up."});
  s.paragraph();
  s.say(
      {"{His} {adult} came and sat next to {him}.", "Then {fdesc} came by.", "{His} {adult} smiled and gave {him} a hug."});
  s.say({"\"Don't give up,\" {helper} said. \"Let's try together.\"", "\"I have an idea,\" said {helper}.",
         "{Helper} said, \"Everybody needs practice. Try one more time.\""});
  s.say({"So {hero} {fix}.", "This time, {hero} {fix}.", "{Hero} listened, and {he} {fix}."});
  s.say({"It worked! {Hero} could {activity}!", "And this time it worked!", "Slowly, it got easier, and then {he} did it!"});
  s.paragraph();
  s.say({"{Hero} felt so {feel}.", "\"I did it!\" {hero} shouted. {He} was very {feel}.",
         "{Hero} laughed and felt {feel} all day."});
  s.maybe(50, {"{He} thanked {helper} for helping.", "Now {he} wants to {activity} every day."});
  closing(s);
}

void sharing_quarrel(Story& s) {
  moral(s, {0, 1});
  s.say({"{Opening} {hero} and {friend} were playing in the {place}.", "{Opening} {hero} and {friend} went to the {place}.",
         "{Opening} two friends, {hero} and {friend}, played together at the {place}."});
  scene(s);
  s.say({"They both wanted to play with {obj_the}.", "They found {obj_a} {spot}.",
         "{Hero} had {obj_a}, and {friend} wanted it too."});
  s.say({"\"It's mine!\" said {hero}.", "\"I saw it first!\" {hero} shouted.", "\"Give it to me!\" said {friend}."});
  s.say({"\"No, it's mine!\" said {friend}.", "\"But I want to play with it!\" {friend} said.",
         "{Friend} pulled, and {hero} pulled."});
  s.maybe(60, {"They pulled so hard that they both fell down.", "The {obj} flew up and landed {spot}.",
               "Both of them were {bad} and would not talk."});
  s.paragraph();
  s.say({"Then {hero}'s {adult} came over.", "A kind {adult} saw them and came to help.",
         "{Hero}'s {adult} heard the noise."});
  s.say({"\"Why don't you take turns?\" the {adult} said.",
         "\"You can share it,\" said the {adult}. \"Then you can both play.\"",
         "The {adult} said, \"Toys are more fun when you play together.\""});
  s.say({"{Hero} and {friend} looked at each other.", "The two friends thought about it.",
         "{Hero} said, \"Sorry, {friend}.\""});
  s.say({"They took turns with the {obj}, and it was so much fun.", "They played with the {obj} together and laughed.",
         "{Hero} let {friend} go first, and then {friend} gave it back."});
  s.paragraph();
  s.say({"They learned that {moral}.", "From then on, they always shared their toys."});
  s.maybe(75, {"{Ending}"});
}

void overcome_fear(Story& s) {
  moral(s, {3, 5});
  introduce(s);
  s.say({"But {hero} was scared of {fear}.", "{Hero} was afraid of {fear}.",
         "There was one thing {hero} did not like: {fear}."});
  s.say({"Every time {he} thought about it, {he} felt {bad}.", "{He} would hide and close {his} eyes.",
         "\"I don't like {fear},\" {he} said in a small voice."});
  s.paragraph();
  s.say({"One day, {his} {adult} sat down with {him}.", "{Fdesc} saw that {hero} was {bad}.",
         "{His} {adult} held {his} hand."});
  s.say({"\"There is nothing to be afraid of,\" said {helper}.", "\"Let me show you something,\" said {helper}.",
         "\"I used to be scared too,\" {helper} said."});
  s.say({"{Helper} showed {him} that {comfort}.", "Then {hero} saw that {comfort}.",
         "{Hero} looked closely and saw that {comfort}."});
  s.say({"{Hero} took a deep breath.", "{Hero} was still a little scared, but {he} tried to be brave.",
         "{Hero} smiled a little."});
  s.paragraph();
  s.say({"Soon {he} was not scared anymore.", "After that, {fear} did not seem so bad.", "{He} felt brave and {feel}."});
  closing(s);
}

void help_animal(Story& s) {
  moral(s, {1, 4});
  introduce(s);
  s.say({"One day, {hero} heard {sound} {spot}.", "While walking in the {place}, {hero} heard {sound}.",
         "{Hero} was playing when {he} heard {sound}."});
  s.say({"It was a little {pet} with a hurt leg.", "{He} found a tiny {pet} that could not walk.",
         "A small {pet} was stuck {spot}."});
  s.say({"The {pet} looked {bad} and cold.", "\"Oh no, poor {pet}!\" said {hero}.", "The {pet} was shaking."});
  s.paragraph();
  s.say({"{Hero} picked it up very gently.", "{Hero} wrapped it in {his} scarf.", "{Hero} ran to get {his} {adult}."});
  s.say({"{His} {adult} helped {him} give the {pet} some water and {food_a}.",
         "They made a soft bed for the {pet} in a box.", "Together they took care of the {pet} for many days."});
  s.say({"Soon the {pet} was strong again.", "Day by day, the {pet} got better.",
         "After a week, the {pet} could run and play."});
  s.paragraph();
  s.say({"The {pet} licked {hero}'s hand to say thank you.", "The {pet} did a happy little dance.",
         "The {pet} came back to visit {hero} every day."});
  s.say({"{Hero} felt warm and {feel} inside.", "{Hero} was so {feel} that {he} had helped."});
  closing(s);
}

void make_present(Story& s) {
  moral(s, {1, 6});
  introduce(s);
  s.say({"It was {his} {adult}'s birthday soon.", "{Hero} wanted to make a surprise for {his} {adult}.",
         "{Hero} wanted to give {his} {adult} a present."});
  s.say({"{He} had no money, so {he} decided to make something.", "\"What can I give?\" {hero} wondered.",
         "{He} thought and thought about what to make."});
  s.say({"{He} found some paper, glue and a {color} ribbon.", "{He} picked pretty flowers in the {place}.",
         "{He} decided to draw a picture of {his} family."});
  s.paragraph();
  s.maybe(70, {"But the glue got everywhere, even in {his} hair!", "Oops! {He} spilled paint on the floor.",
               "The wind blew the paper away, and {he} had to start again."});
  s.say({"{Hero} did not give up.", "{Hero} worked very hard all afternoon.", "{Friend} helped {him} clean up and finish."});
  s.say({"When {his} {adult} came home, {hero} shouted, \"Surprise!\"", "At last, {he} gave the present to {his} {adult}."});
  s.say({"{His} {adult} smiled and gave {him} a big hug.", "\"This is the best present ever,\" said {his} {adult}.",
         "{His} {adult} laughed and said, \"Thank you, my sweet {kind}.\""});
  s.paragraph();
  s.say({"{Hero} felt {feel}.", "{Hero} learned that a present made with love is the best kind."});
  s.maybe(75, {"{Ending}"});
}

void broken_rule(Story& s) {
  moral(s, {2, 7, 8});
  introduce(s);
  s.say({"{His} {adult} said, \"Please do not play with my {obj} {keep}.\"",
         "{His} {adult} had a {obj} and said, \"Don't touch it.\"",
         "There was a {obj} {keep} that {hero} was told not to touch."});
  s.say({"But {hero} was curious.", "{Hero} really wanted to play with it.", "{Hero} forgot what {his} {adult} said."});
  s.say({"{He} took the {obj} and played with it in the {place}.", "{He} picked it up when no one was looking."});
  s.say({"Then, oh no! The {obj} broke.", "Suddenly the {obj} fell and got dirty and bent.",
         "{He} dropped it, and it broke in two."});
  s.paragraph();
  s.say({"{Hero} felt {bad}. {He} wanted to hide it.", "{Hero} was scared and did not know what to do.",
         "{Hero} thought about hiding it {spot}."});
  s.say({"But then {he} went to {his} {adult} and said, \"I'm sorry. I broke it.\"", "Then {he} decided to tell the truth.",
         "{Friend} said, \"You should tell the truth.\""});
  s.say({"{His} {adult} was sad, but {adult_he} was glad {hero} told the truth.",
         "{His} {adult} hugged {him} and said, \"Thank you for being honest.\""});
  s.say({"Together they fixed the {obj}.", "They glued the {obj} back together.",
         "They cleaned the {obj} until it looked new."});
  s.paragraph();
  s.say({"{Hero} learned that {moral}.", "From then on, {hero} always listened to {his} {adult}."});
  s.maybe(75, {"{Ending}"});
}

void new_friend(Story& s) {
  moral(s, {1, 4, 3});
  introduce(s);
  s.say({"But {hero} had no one to play with.", "{Hero} felt lonely, because {his} friends were away.",
         "{Hero} was new in town and did not know anyone."});
  s.say({"One day, {he} saw {fdesc} sitting {spot}.", "At the {place}, {he} met a {fkind} named {friend}.",
         "Then {he} saw a {fkind} named {friend} all alone."});
  s.say({"{Friend} looked {bad} too.", "{Friend} looked shy.", "{Friend} was trying to {activity}, but {hard}."});
  s.paragraph();
  s.say({"\"Hello, I'm {hero}. Do you want to play?\" asked {hero}.",
         "{Hero} walked over and said, \"Hi! Can I play with you?\"", "{Hero} was shy, but {he} said hello."});
  s.say({"{Friend} smiled and said, \"Yes, please!\"", "\"I would like that,\" said {friend}.", "{Friend} nodded happily."});
  s.say({"They played with {obj_a} and ran all over the {place}.", "They played games until the sun went down.",
         "They shared {food_a} and told funny stories."});
  s.paragraph();
  s.say({"{Hero} was not lonely anymore.", "Both of them felt {feel}."});
  closing(s);
}

void rainy_day(Story& s) {
  moral(s, {4, 9});
  introduce(s);
  s.say({"{Hero} and {friend} wanted to play outside.", "{Hero} wanted to go to the {place} with {friend}."});
  s.say({"But then dark clouds came, and it began to rain.", "Suddenly it started to rain very hard.",
         "Then the sky turned gray, and big drops began to fall."});
  s.say({"\"Oh no! Now we can't play,\" said {hero}.", "{Hero} felt {bad}.", "They ran {spot} to stay dry."});
  s.paragraph();
  s.say({"Then {friend} had an idea.", "\"Let's play inside,\" said {friend}.",
         "{Hero}'s {adult} said, \"Why not play in the rain?\""});
  s.say({"They put on boots and jumped in the puddles.", "They built a fort with a blanket and pillows.",
         "They made a boat out of paper and watched it float."});
  s.say(
      {"They laughed and laughed.", "It was more fun than they thought.", "Splash! They got wet and did not mind at all."});
  s.paragraph();
  s.say({"When the rain stopped, they saw a big rainbow.", "Later, the sun came out, and a rainbow filled the sky.",
         "Soon the clouds went away."});
  s.say({"{Hero} felt {feel}.", "\"Rainy days can be fun too,\" said {hero}."});
  closing(s);
}

using Shape = void (*)(Story&);
const Shape kShapes[] = {lost_object,  learn_activity, sharing_quarrel, overcome_fear, help_animal,
                         make_present, broken_rule,    new_friend,      rainy_day};

// Picks every slot a shape may use; shapes use the ones they need.
void cast(Story& s) {
  Rng& rng = s.rng();
  const Character hero = make_character(rng, true);
  Character friend_ = make_character(rng, true);
  while (friend_.name == hero.name) friend_ = make_character(rng, true);
  s.set_character("", hero);
  s.set_character("f", friend_);
  const bool animal = hero.kind != "girl" && hero.kind != "boy";
  static const std::vector<std::string> kIntroAdjectives = {"little", "small", "young", "happy", "kind", "curious"};
  static const std::vector<std::string> kTraits = {"kind",   "curious",  "brave",  "playful", "shy",
                                                   "clever", "cheerful", "gentle", "silly",   "friendly"};
  s.set("intro", with_article(rng.pick(kIntroAdjectives) + " " + hero.kind) + " named " + hero.name);
  const std::string trait = rng.pick(kTraits);
  s.set("trait", trait);
  s.set("trait_a", with_article(trait));
  const std::string adult = animal ? (rng.chance(50) ? "mom" : "dad") : rng.pick(kGrownUps);
  s.set("adult", adult);
  s.set("adult_he", adult == "mom" || adult == "grandma" || adult == "aunt" ? "she" : "he");
  const bool helper_is_friend = rng.chance(40);
  s.set("helper", helper_is_friend ? friend_.name : hero.his + " " + adult);
  const Thing& thing = rng.pick(kThings);
  const std::string color = rng.pick(kColors);
  s.set("obj", thing.noun);
  s.set("obj_a", with_article(color + " " + thing.noun));
  s.set("obj_the", "the " + color + " " + thing.noun);
  s.set("keep", thing.where_kept);
  s.set("color", color);
  s.set("size", rng.pick(kSizes));
  s.set("place", rng.pick(kPlaces));
  s.set("spot", rng.pick(kHidingSpots));
  s.set("spot2", rng.pick(kHidingSpots));
  s.set("feel", rng.pick(kHappyFeelings));
  s.set("bad", rng.pick(kBadFeelings));
  const std::string food = rng.pick(kFoods);
  s.set("food", food);
  s.set("food_a", with_article(food));
  s.set("sound", rng.pick(kSounds));
  s.set("weather", rng.pick(kWeather));
  const Activity& act = rng.pick(kActivities);
  s.set("activity", act.verb_phrase);
  s.set("gerund", act.gerund);
  s.set("hard", act.hard_part);
  s.set("fix", act.fix);
  const Fear& fear = rng.pick(kFears);
  s.set("fear", fear.thing);
  s.set("comfort", fear.comfort);
  s.set("moral", rng.pick(kMorals));
  s.set("pet", rng.pick(kAnimalKinds).noun);
  s.set("they", hero.name + " and " + friend_.name);
  const bool friend_animal = friend_.kind != "girl" && friend_.kind != "boy";
  s.set("fdesc", friend_animal ? friend_.name + " the " + friend_.kind : friend_.name);
  s.set("opening", rng.pick(kOpenings));
  s.set("ending", "");
}

}  // namespace

std::string builtin_story(uint64_t index, uint64_t seed) {
  Rng rng(seed, index);
  Story s(rng);
  cast(s);
  // The ending sentence has slots of its own, so it is expanded through a second story sharing
  // the slots: pick it first, then store the expanded text.
  Story ending_probe = s;
  ending_probe.say(kEndings);
  s.set("ending", ending_probe.finish());
  kShapes[rng.below(std::size(kShapes))](s);
  return s.finish();
}

std::vector<std::string> builtin_corpus(size_t n_stories, uint64_t seed) {
  std::vector<std::string> out;
  out.reserve(n_stories);
  for (size_t i = 0; i < n_stories; ++i) out.push_back(builtin_story(i, seed));
  return out;
}

}  // namespace orion::data
