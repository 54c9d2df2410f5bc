#include "data/builtin_corpus_words.h"

namespace orion::data::corpus {

const std::vector<std::string> kGirlNames = {"Lily",  "Mia",  "Emma",  "Sue",  "Amy",  "Lucy",  "Anna", "Zoe",
                                             "Sara",  "Ella", "Rosie", "Kate", "Mila", "Nora",  "Ruby", "Daisy",
                                             "Molly", "Jane", "Grace", "Ivy",  "Lena", "Hanna", "Pia",  "Maya"};
const std::vector<std::string> kBoyNames = {"Tom",  "Ben",  "Max",   "Sam",  "Leo",  "Jack",  "Tim",  "Finn",
                                            "Jake", "Noah", "Eli",   "Luke", "Owen", "Ryan",  "Joe",  "Dan",
                                            "Theo", "Milo", "Oscar", "Alex", "Ned",  "Bobby", "Hugo", "Adam"};
const std::vector<std::string> kAnimalNames = {"Whiskers", "Spot",  "Fluffy", "Bubbles", "Pip",     "Coco",  "Sunny",
                                               "Buddy",    "Benny", "Luna",   "Tiny",    "Ziggy",   "Rex",   "Hoppy",
                                               "Nibbles",  "Dot",   "Pebble", "Fuzzy",   "Biscuit", "Peanut"};

const std::vector<Kind> kAnimalKinds = {{"cat", true},      {"dog", true},   {"bunny", true},  {"bear", true},
                                        {"fox", true},      {"bird", true},  {"duck", true},   {"frog", true},
                                        {"mouse", true},    {"puppy", true}, {"kitten", true}, {"owl", true},
                                        {"squirrel", true}, {"pig", true},   {"turtle", true}, {"elephant", true},
                                        {"monkey", true},   {"lamb", true}};

const std::vector<std::string> kGrownUps = {"mom", "dad", "grandma", "grandpa", "aunt", "uncle"};

const std::vector<Thing> kThings = {
    {"ball", "in the yard"},         {"kite", "in the closet"},        {"teddy bear", "on the bed"},
    {"toy car", "in the toy box"},   {"doll", "on the shelf"},         {"hat", "on the hook"},
    {"book", "on the little table"}, {"cup", "in the kitchen"},        {"stone", "in a small box"},
    {"drum", "under the stairs"},    {"boat", "by the bathtub"},       {"balloon", "by the window"},
    {"puzzle", "on the rug"},        {"crayon", "in the pencil case"}, {"shell", "on the windowsill"},
    {"blanket", "on the couch"},     {"robot", "in the toy box"},      {"train", "on the floor"},
    {"bike", "in the garage"},       {"scarf", "in the drawer"},       {"spoon", "in the drawer"},
    {"bucket", "by the door"},       {"whistle", "in a pocket"},       {"ribbon", "in a basket"}};

const std::vector<std::string> kColors = {"red",   "blue",  "green",  "yellow", "pink",    "purple", "orange",
                                          "white", "brown", "golden", "shiny",  "striped", "spotty"};
const std::vector<std::string> kSizes = {"big", "little", "tiny", "soft", "new", "old", "round", "funny"};

const std::vector<std::string> kPlaces = {"park",  "garden", "forest", "beach",      "backyard",    "farm",
                                          "lake",  "hill",   "school", "playground", "library",     "zoo",
                                          "river", "meadow", "pond",   "market",     "town square", "woods"};
const std::vector<std::string> kHidingSpots = {"under the big tree", "behind a bench",         "near the pond",
                                               "in a thick bush",    "under a pile of leaves", "inside an old box",
                                               "next to the fence",  "on top of the slide",    "under the bed",
                                               "behind the door",    "in the tall grass",      "beside a sleepy cat",
                                               "in a muddy puddle",  "under a flower pot",     "inside a boot",
                                               "on a high branch"};

const std::vector<std::string> kHappyFeelings = {"happy", "glad", "proud", "excited", "cheerful", "calm"};
const std::vector<std::string> kBadFeelings = {"sad", "worried", "upset", "grumpy", "lonely", "scared"};

const std::vector<Activity> kActivities = {
    {"fly a kite", "flying kites", "the wind was too weak", "ran fast across the grass"},
    {"climb the tall tree", "climbing trees", "the first branch was too high", "stood on a strong box"},
    {"build a sandcastle", "building sandcastles", "the sand kept falling down", "added a little water"},
    {"bake a cake", "baking cakes", "the batter was too thick", "poured in more milk"},
    {"paint a picture", "painting", "the colors all mixed into brown", "waited for each color to dry"},
    {"ride a bike", "riding bikes", "the bike kept wobbling", "pedaled slowly and looked ahead"},
    {"plant seeds", "planting seeds", "the ground was hard and dry", "dug deeper and gave them water"},
    {"build a tower of blocks", "building towers", "the tower fell over", "put the big blocks at the bottom"},
    {"catch a fish", "fishing", "the fish swam away", "sat very still and waited"},
    {"make a paper boat", "folding boats", "the paper got wet and soft", "used thicker paper"},
    {"sing a song for the class", "singing", "the words got mixed up", "practiced every night"},
    {"jump over the puddle", "jumping", "the puddle was very wide", "took a long run first"},
    {"whistle a tune", "whistling", "only air came out", "made a small round mouth"},
    {"swim in the lake", "swimming", "the water felt too deep", "held on to a float"}};

const std::vector<Fear> kFears = {{"the dark", "a little lamp glowed softly by the bed"},
                                  {"the thunder", "the storm was only clouds bumping and making noise"},
                                  {"the big dog next door", "the dog just wanted to play and wagged its tail"},
                                  {"the deep water", "the water was only up to the knees"},
                                  {"the tall slide", "the slide was smooth and fast and fun"},
                                  {"the loud vacuum", "the vacuum only eats dust and crumbs"},
                                  {"the shadow on the wall", "the shadow was only a coat on a chair"},
                                  {"the first day at school", "the other children were nice and wanted to play"},
                                  {"the buzzing bee", "the bee only cared about the flowers"}};

const std::vector<std::string> kOpenings = {"Once upon a time,",      "One day,",     "One sunny morning,",
                                            "One rainy afternoon,",   "Last summer,", "On a cold winter day,",
                                            "One bright spring day,", "Long ago,",    "One windy evening,",
                                            "Early one morning,"};
const std::vector<std::string> kWeather = {"sunny", "warm", "windy", "cloudy", "bright", "cool", "rainy"};
const std::vector<std::string> kFoods = {"apple",  "cookie",        "sandwich",     "banana", "muffin",
                                         "carrot", "piece of cake", "bowl of soup", "orange", "cup of milk"};
const std::vector<std::string> kSounds = {"a loud bang",    "a soft squeak", "a funny noise", "a little cry",
                                          "a strange buzz", "a happy chirp", "a quiet knock"};
const std::vector<std::string> kMorals = {"sharing is more fun than keeping things to yourself",
                                          "it is good to be kind to everyone",
                                          "telling the truth is always the right thing to do",
                                          "being brave means trying even when you are scared",
                                          "friends help each other",
                                          "it is okay to ask for help",
                                          "if you keep trying, you can do hard things",
                                          "listening to grown-ups can keep you safe",
                                          "saying sorry can make things better",
                                          "being patient is worth it"};
const std::vector<std::string> kEndings = {"From that day on, {they} were the best of friends.",
                                           "It was the best day ever.",
                                           "{He} went to bed with a big smile.",
                                           "And {he} never forgot that day.",
                                           "Everyone was happy, and they all went home together.",
                                           "That night, {he} dreamed about it and smiled in {his} sleep."};

}  // namespace orion::data::corpus
