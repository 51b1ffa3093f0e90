"""Bundled first-name list for the built-in person-name backend (no download needed).

Common given names from UK and US birth registers and the main communities they cover,
lower-cased.  A name outside this list is still found when a cue precedes it (``Mr``,
``Dr``, ``Patient:``, ``Name:``...); see ``names.py``.
"""

FIRST_NAMES = frozenset("""
aoife ciara niamh siobhan saoirse orla roisin sinead padraig eoin cian oisin rhys dafydd
gethin sian cerys bronwen angharad iwan ewan fraser lachlan hamish morag ailsa catriona eilidh
tomasz piotr krzysztof agnieszka katarzyna magdalena marta pawel jakub aleksandra ingrid astrid
freja sven lars nils björn bjorn anders erik karin sigrid mateo santiago alejandro valentina
camila lucia carmen pablo diego sergio rosalind beatrix clementine imelda cordelia ophelia
kwame kofi ama akua yaw oluwaseun chidi chiamaka ngozi emeka adebayo folake tunde amara zainab
ibrahim yusuf khalid tariq bilal hamza layla noor mariam leila farah sanjay anil deepak vikram
sunil kavita anjali pooja neha rohan aditya arjun ananya wei ming jun hui xin yan li mei hiroshi
yuki kenji akira haruto sakura min-jun seo-yeon ji-woo hyun nguyen thanh linh olga irina natasha
dmitri sergei alexei yuri svetlana pierre jacques louise amelie camille chloé mathieu giulia
alessandro luca marco francesca chiara
aaron abdul abdullah abigail ada adam adrian ahmed aidan aisha alan albert alex alexander alexandra
alexis alfie alfred ali alice alicia alison amanda amber amelia amir amy ana andrea andrew angela
angus anita ann anna anne annie anthony antonio april archie arthur arjun ashley aubrey audrey
austin ava barbara barry beatrice ben benjamin bernard beth bethany betty beverley bill billy bob
bobby bonnie brandon brenda brian bridget brittany bruce bryan caitlin callum calvin cameron carl
carla carlos carol caroline carolyn carrie catherine charles charlie charlotte chen chloe chris
christina christine christopher cindy claire clara clare colin connor craig cynthia daisy dale
damian daniel danielle darren david dawn dean deborah debra declan denise dennis derek diana diane
dimitri dominic donald donna dorothy douglas duncan dylan eddie edward eileen elaine eleanor elena
eli elijah elizabeth ella ellie eloise emily emma eric erica erin ethan eugene eva evan evelyn
fatima felix fiona florence frances francesca francis frank freddie frederick freya gabriel
gareth gary gavin gemma george georgia gerald gina giovanni gloria gordon grace graham grant
gregory hana hannah harold harriet harry harvey hassan hayley heather helen henry holly howard
hugh hugo ian imogen irene isaac isabel isabella isabelle isla ivan jack jackie jacob jacqueline
jade james jamie jan jane janet janice jasmine jason javier jayden jean jeffrey jennifer jenny
jeremy jerry jessica jill jim jimmy joan joanna joanne joe joel john johnny jon jonathan jordan
jorge jose joseph josephine joshua joyce juan judith judy julia julian julie june justin kai karen
karl kate katherine kathleen kathryn katie kayla keith kelly kenneth kerry kevin kieran kim
kimberly kirsty kyle laura lauren lawrence layla leah lee leo leon leonard lewis liam lily linda
lisa logan lois lola louis louise lucas lucy luis luke lydia lynn madison maisie malcolm mandy
manuel marcus margaret maria marie marilyn mario mark martha martin mary mason matilda matthew
maureen max maya megan melanie melissa mia michael michelle miguel mila mildred mohammed mohammad
molly mona muhammad nancy naomi natalie nathan neil nicholas nicola nicole noah nora norman
oliver olivia omar oscar owen paige pamela patricia patrick paul paula pauline peter philip
phoebe phyllis poppy priya rachel rahul raj ralph ramesh raymond rebecca reece richard rita
robert robin roger ronald rose rosie ross roy ruby russell ruth ryan sadie sally samantha samuel
sandra sara sarah scarlett scott sean sebastian shane sharon sheila shirley simon sofia sophia
sophie stacey stanley stella stephanie stephen steven stuart sunita susan suzanne sylvia tanya
teresa terry thea theo theodore theresa thomas tim timothy tina toby todd tom tommy tony tracey
tracy trevor tyler valerie vanessa vera veronica victor victoria vincent violet virginia walter
wanda wayne wendy william willow xavier yasmin yusuf zac zachary zara zoe
""".split())
